"""The composition root: ``load`` wires the session, the magics, the views and their hooks when
``%load_ext monarch_jupyter`` runs; ``completion`` is Tab on every magic's line."""
