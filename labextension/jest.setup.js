// jsdom has no DragEvent, which @lumino/dragdrop subclasses at import time.
if (typeof window !== 'undefined' && typeof window.DragEvent === 'undefined') {
  window.DragEvent = class DragEvent extends window.MouseEvent {};
}
