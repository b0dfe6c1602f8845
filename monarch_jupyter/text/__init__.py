"""Pure text, shared by every magic and view: the argparse base of the magics (``parser``), rank
sets (``rank_sets``), time formats (``timefmt``) and remote text made safe for terminals
(``terminal``). No threads, no Monarch, no IPython."""
