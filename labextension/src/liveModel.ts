/** Which widget model an output's live view is drawn from: pure, so it is tested without Lab. */

export const WIDGET_MIME = 'application/vnd.jupyter.widget-view+json';
export const JOB_MIME = 'application/vnd.monarch.job+json';

/**
 * The model named by our payload's `model_id` (outputs hold no widget view: static first), or
 * by an older output's saved widget view; null when there is none.
 */
export function liveModelId(
  data: Readonly<Record<string, unknown>>,
  mimeType: string
): string | null {
  for (const source of [data[mimeType], data[WIDGET_MIME]]) {
    const id = (source as { model_id?: unknown } | undefined)?.model_id;
    if (typeof id === 'string' && id) {
      return id;
    }
  }
  return null;
}
