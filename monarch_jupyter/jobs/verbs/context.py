"""``%job context ls|use|create|rm``: the folder's contexts, as the ``monarch`` CLI has them."""

from __future__ import annotations

from .registry import Cell, arg, given, verb


@verb("context ls", "list contexts (* marks the active one)")
def ls(cell: Cell) -> None:
    from .. import formatting

    print(formatting.contexts_text(cell.session.contexts()))


@verb("context use", "switch the active context (attaches to its job)", arg("name", metavar="NAME"))
def use(cell: Cell, name: str | None = None) -> None:
    from .. import formatting

    # As `monarch context use`, a new name creates the context; said, so a typo shows.
    name = given(name, "context use")
    created = not cell.session.layout.exists(name)
    status = cell.session.use(name)
    if created:
        others = [other for other in cell.session.layout.names() if other != name]
        print(formatting.created_context_line(name, others))
    print(f"switched to context '{name}'")
    print(formatting.attach_line(status))


@verb("context create", "create a context", arg("name", metavar="NAME"))
def create(cell: Cell, name: str | None = None) -> None:
    made = cell.session.create(given(name, "context create"))
    print(f"created context '{name}'" if made else f"context '{name}' already exists")


@verb("context rm", "kill a context's job and delete the context", arg("name", metavar="NAME"))
def rm(cell: Cell, name: str | None = None) -> None:
    from .. import formatting

    killed = cell.session.remove(given(name, "context rm"))
    extra = f" (killed {killed.job_class} {formatting.short_id(killed.apply_id)})" if killed else ""
    print(f"removed context '{name}'{extra}")
