/**
 * The Monarch sidebar icon.
 */
import { LabIcon } from '@jupyterlab/ui-components';

const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24">
  <path class="jp-icon3" fill="#616161" d="M12 11.5c-.6-2.6-2.4-6.7-6.6-7.5C2.6 3.5 2 5.6 2.6 8c.5 2 1.9 3.4 3.6 3.7-1.6.6-2.6 2-2.3 3.7.4 2.2 2.7 3.1 4.4 2 1.6-1 3-3.5 3.7-5.9zm0 0c.6-2.6 2.4-6.7 6.6-7.5 2.8-.5 3.4 1.6 2.8 4-.5 2-1.9 3.4-3.6 3.7 1.6.6 2.6 2 2.3 3.7-.4 2.2-2.7 3.1-4.4 2-1.6-1-3-3.5-3.7-5.9z"/>
</svg>`;

/** Butterfly icon for the "Monarch" sidebar tab. */
export const monarchIcon = new LabIcon({
  name: 'monarch_jupyter:monarch',
  svgstr: svg
});
