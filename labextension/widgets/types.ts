/** What the run grid's views share: the synced shapes, as the kernel side sends them. */

/**
 * One rank's tile, as widgets/run_model.py `tile_json` sends it.
 */
export interface ITile {
  rank: number;
  label: string;
  status: string;
  failing: boolean;
  returncode: number | null;
  duration: number | null;
  /** epoch seconds */
  started: number | null;
  error: string | null;
  /** epoch seconds of its last output, while quiet */
  quiet_since?: number | null;
  /** its \r-rewritten unfinished line (a progress bar) as it stands */
  progress?: string | null;
}

/**
 * Ranks whose output is identical so far, as widgets/grid_fold.py sends them.
 */
export interface IGroup {
  /** hosts=[0-6,8] (8) */
  label: string;
  /** tile indices as [first, last] runs */
  ranks: number[][];
  count: number;
  /** the first member: its tile stands for the group */
  rank: number;
  status: string;
  failing: boolean;
  quiet: boolean;
  idle?: boolean;
}

/**
 * A rank's resources, as the kernel's usage answer sends them.
 */
export interface IUsage {
  /** % of one core */
  cpu?: number | null;
  /** bytes */
  rss?: number | null;
  gpu_mib?: number | null;
  /** ~0 % CPU while the others work */
  idle?: boolean;
}

/** [stream, text] */
export type Line = [string, string];

/**
 * The part of anywidget's model this view uses.
 */
export interface IModel {
  get: (name: string) => any;
  set: (name: string, value: any) => void;
  save_changes: () => void;
  send: (content: object) => void;
  on: (event: string, callback: (...args: any[]) => void) => void;
  off: (event: string, callback: (...args: any[]) => void) => void;
}
