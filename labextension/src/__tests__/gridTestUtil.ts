/**
 * What the run grid's specs share (widgets/run.ts, built into monarch_jupyter/widgets/run.js): a model
 * that behaves like anywidget's (synced values, change events, custom
 * messages) and a view mounted per test under fake timers, unmounted after it.
 * Not a spec itself (jest runs *.spec.ts only).
 */
import widget from '../../widgets/run';

type Handler = (...args: any[]) => void;

/** The values the kernel syncs first; a spec's `data` overrides them. */
const DEFAULTS: Record<string, any> = {
  title: '%%remote',
  summary: '',
  tiles: [],
  tails: {},
  finished: false,
  stopping: '',
  kernel_id: 'k1',
  selected: -1,
  failing_only: false
};

export class FakeModel {
  /** save_changes() calls */
  saved = 0;
  /** custom messages the view sent */
  sent: any[] = [];
  private _data: Record<string, any>;
  private _handlers = new Map<string, Set<Handler>>();

  constructor(data: Record<string, any> = {}) {
    this._data = { ...DEFAULTS, ...data };
  }

  get(name: string): any {
    return this._data[name];
  }

  set(name: string, value: any): void {
    this._data[name] = value;
    this.emit(`change:${name}`);
  }

  save_changes(): void {
    this.saved += 1;
  }

  send(content: any): void {
    this.sent.push(content);
  }

  on(event: string, handler: Handler): void {
    if (!this._handlers.has(event)) {
      this._handlers.set(event, new Set());
    }
    this._handlers.get(event)!.add(handler);
  }

  off(event: string, handler: Handler): void {
    this._handlers.get(event)?.delete(handler);
  }

  emit(event: string, ...args: any[]): void {
    for (const handler of this._handlers.get(event) ?? []) {
      handler(...args);
    }
  }

  /** handlers still registered */
  listeners(): number {
    let n = 0;
    this._handlers.forEach(set => (n += set.size));
    return n;
  }
}

/** One animation frame of the grid, on the fake timers. */
export function frame(): void {
  jest.advanceTimersByTime(20);
}

let clockStart = 0; // the fake clock's start: its animation frames fall every 16 ms from it

/** Exactly one animation frame (frame() may span two: 20 ms can hold two 16 ms ticks). */
export function nextFrame(): void {
  jest.advanceTimersByTime(16 - ((Date.now() - clockStart) % 16));
}

/** Frames enough for a grid that makes and writes its tiles a few dozen a frame to finish. */
export function settle(): void {
  for (let i = 0; i < 10; i++) {
    frame();
  }
}

export interface IGridView {
  /** the element the grid renders into, fresh in the document for each test */
  root: HTMLElement;
  /** renders the grid of `model` into `root`; unmounted after the test */
  render(model: FakeModel): void;
  /** unmounts the grid now (what closing the output does) */
  unmount(): void;
}

/** Registers, in the calling `describe`, the per-test set-up and tear-down of a grid view. */
export function gridView(): IGridView {
  let cleanup: (() => void) | undefined;
  const view: IGridView = {
    root: undefined as unknown as HTMLElement,
    render(model: FakeModel): void {
      cleanup = widget.render({ model, el: view.root } as any) as () => void;
    },
    unmount(): void {
      cleanup?.();
      cleanup = undefined;
    }
  };
  beforeEach(() => {
    jest.useFakeTimers();
    clockStart = Date.now();
    view.root = document.createElement('div');
    document.body.appendChild(view.root);
  });
  afterEach(() => {
    view.unmount();
    view.root.remove();
    jest.useRealTimers();
  });
  return view;
}
