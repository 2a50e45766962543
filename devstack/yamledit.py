"""Comment-preserving edits of the `resources:` list of a devstack.yaml.

An edit splices text at the positions PyYAML's composer reports for the
nodes it touches, so every byte outside the entry it adds, removes or
changes stays as it was: comments, blank lines, key order, quoting and the
file's own indentation style. (ruamel.yaml's round trip was tried first: it
re-indents the whole document to one sequence style, so the examples' mixed
`- from:` / `- uses:` indentation would change on every edit.)

Every edit is checked by parsing its result: the data must be exactly the
old data with that one change, otherwise EditError is raised and the caller
writes nothing. Block lists (the usual style) and the empty forms
(`resources:`, `resources: []`, no key at all) are supported; a non-empty
flow list (`resources: [{...}]`) is refused with a message, not rewritten.
"""

from __future__ import annotations

import copy
import functools
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from components.models import instance_name


def nearest_devstack_yaml(here: Path | None = None) -> Path | None:
    """The devstack.yaml first found walking up from `here` (the current directory), resolved; None if none."""
    here = (here or Path.cwd()).resolve()
    for directory in (here, *here.parents):
        if (directory / "devstack.yaml").is_file():
            return (directory / "devstack.yaml").resolve()
    return None

KEY = "resources"


class EditError(ValueError):
    """The file cannot be edited safely; nothing was changed."""


FLOW_LIST = "`resources` is a flow list ([...]); write it as a block list (one `- ` per entry) to edit it"


# --- queries -------------------------------------------------------------


def matching_entries(data: Any, uses: str, kind: str, name: str) -> list[int]:
    """Indexes of `resources:` entries declaring `uses`/`kind`/`name` (name defaults to the project).

    `uses: pg` and `uses: workspace.shared.pg` name the same instance: either matches either.
    """
    if not isinstance(data, dict) or not isinstance(data.get(KEY), list):
        return []
    project = data.get("name")
    return [
        i for i, item in enumerate(data[KEY])
        if isinstance(item, dict) and isinstance(item.get("uses"), str)
        and instance_name(item["uses"]) == instance_name(uses) and item.get("kind") == kind
        and (item.get("name") or project) == name
    ]


# --- edits ---------------------------------------------------------------


def _keeping_line_ends(edit: Callable[..., str]) -> Callable[..., str]:
    """A file with CRLF line ends is edited as LF and written back with CRLF, so the lines an edit
    adds end like the rest. Mixed line ends are left as they are."""

    @functools.wraps(edit)
    def edited(text: str, *args: Any) -> str:
        if "\r\n" not in text or text.count("\n") != text.count("\r\n"):
            return edit(text, *args)
        return edit(text.replace("\r\n", "\n"), *args).replace("\n", "\r\n")

    return edited


@_keeping_line_ends
def add_entry(text: str, entry: dict[str, Any]) -> str:
    """`text` with `entry` appended to `resources:` (created when absent)."""
    text = _ending_in_newline(text)
    data = _load(text)
    root, key, seq = _locate(text)
    if seq is None or _is_empty(seq):
        new = _add_first(text, root, key, seq, entry)
    else:
        if seq.flow_style:
            raise EditError(FLOW_LIST)
        last = seq.value[-1]
        dash = _dash_index(text, last)
        dash_col = dash - _line_start(text, dash)
        at = _end_of_node(text, last)
        new = text[:at] + _render(entry, dash_col, last.start_mark.column) + text[at:]
    expected = copy.deepcopy(data) if isinstance(data, dict) else {}
    expected[KEY] = list(expected.get(KEY) or []) + [entry]
    return _checked(new, expected, "add the entry")


@_keeping_line_ends
def remove_entry(text: str, index: int) -> str:
    """`text` without entry `index` of `resources:`; the only entry leaves `resources: []`."""
    data = _load(text)
    _, key, seq = _locate(text)
    item = _item(seq, index)
    start = _line_start(text, _dash_index(text, item))
    new = text[:start] + text[_end_of_node(text, item):]
    if len(seq.value) == 1:
        colon = _colon_index(new, key)
        new = new[: colon + 1] + " []" + new[colon + 1:]
    expected = copy.deepcopy(data)
    del expected[KEY][index]
    return _checked(new, expected, f"remove resources[{index}]")


@_keeping_line_ends
def set_entry_field(text: str, index: int, field: str, value: Any) -> str:
    """`text` with `resources[index].<field>` set to `value` (replaced in place or added last)."""
    text = _ending_in_newline(text)
    data = _load(text)
    _, _, seq = _locate(text)
    item = _item(seq, index)
    if not isinstance(item, yaml.MappingNode):
        raise EditError(f"resources[{index}] is not a mapping")
    existing = next((v for k, v in item.value if k.value == field), None)
    if existing is not None:
        start, end = existing.start_mark.index, _content_end(text, existing)
        new = text[:start] + _flow(value) + text[end:]
    elif item.flow_style:
        brace = item.end_mark.index - 1  # the closing '}'
        new = text[:brace].rstrip() + f", {field}: {_flow(value)}" + text[brace:]
    else:
        at = _end_of_node(text, item)
        new = text[:at] + " " * item.start_mark.column + f"{field}: {_flow(value)}\n" + text[at:]
    expected = copy.deepcopy(data)
    expected[KEY][index][field] = value
    return _checked(new, expected, f"set resources[{index}].{field}")


# --- helpers -------------------------------------------------------------


def _ending_in_newline(text: str) -> str:
    """Entries are added after the last line: a file whose last line has no newline gets one first."""
    return text if not text or text.endswith("\n") else text + "\n"


def _load(text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise EditError(f"not valid YAML: {err}") from None


def _locate(text: str) -> tuple[yaml.MappingNode | None, yaml.Node | None, yaml.Node | None]:
    """The document's mapping, the `resources` key node and its value node (None when absent)."""
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    if root is None:
        return None, None, None
    if not isinstance(root, yaml.MappingNode):
        raise EditError("a devstack.yaml must be a mapping")
    for key, value in root.value:
        if key.value == KEY:
            if not (isinstance(value, yaml.SequenceNode) or _is_empty(value)):
                raise EditError("`resources` must be a list")
            return root, key, value
    return root, None, None


def _is_empty(node: yaml.Node) -> bool:
    """`resources:`, `resources: ~`/`null` or `resources: []`."""
    if isinstance(node, yaml.SequenceNode):
        return not node.value
    return isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null"


def _add_first(text: str, root, key, value, entry: dict[str, Any]) -> str:
    """Start a block list: replace an empty value, or append a `resources:` key."""
    if key is None:
        if root is not None and root.flow_style:
            raise EditError("the document is a flow mapping; write it in block style to edit it")
        return text + f"{KEY}:\n" + _render(entry, 2, 4)  # add_entry ended `text` with a newline
    if value.start_mark.index != value.end_mark.index:  # `[]`, `~` or `null`: drop it
        text = text[: value.start_mark.index].rstrip(" ") + text[value.end_mark.index:]
    at = _after_line(text, key.end_mark.index)
    indent = key.start_mark.column + 2
    return text[:at] + _render(entry, indent, indent + 2) + text[at:]


def _item(seq: yaml.Node | None, index: int) -> yaml.Node:
    if not isinstance(seq, yaml.SequenceNode) or not 0 <= index < len(seq.value):
        raise EditError(f"there is no resources[{index}]")
    if seq.flow_style:
        raise EditError(FLOW_LIST)
    return seq.value[index]


def _render(entry: dict[str, Any], dash_col: int, content_col: int) -> str:
    """One block-list entry: `- key: value` lines, values in flow style."""
    gap = " " * max(1, content_col - dash_col - 1)
    lines = [
        (" " * dash_col + "-" + gap if i == 0 else " " * max(content_col, dash_col + 2)) + f"{key}: {_flow(value)}"
        for i, (key, value) in enumerate(entry.items())
    ]
    return "".join(line + "\n" for line in lines)


def _flow(value: Any) -> str:
    """A value as one line of YAML: `20`, `true`, `'123'`, `{connectionLimit: 20}`."""
    text = yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=math.inf, allow_unicode=True)
    return text.removesuffix("\n").removesuffix("\n...").strip()


def _dash_index(text: str, item: yaml.Node) -> int:
    """The `-` that opens a block-list item (on its line or a line above)."""
    i = item.start_mark.index - 1
    while i >= 0 and text[i] in " \t\r\n":
        i -= 1
    if i < 0 or text[i] != "-":
        raise EditError("cannot find the `-` of a list entry")
    return i


def _colon_index(text: str, key: yaml.Node) -> int:
    i = text.index(":", key.end_mark.index)
    return i


def _line_start(text: str, index: int) -> int:
    return text.rfind("\n", 0, index) + 1


def _after_line(text: str, index: int) -> int:
    """The index just past the end of the line holding `index` (its newline included)."""
    end = text.find("\n", index)
    return len(text) if end < 0 else end + 1


def _content_end(text: str, node: yaml.Node) -> int:
    """Where the node's own characters end: its last leaf, without trailing blank lines."""
    while isinstance(node, (yaml.MappingNode, yaml.SequenceNode)) and node.value and not node.flow_style:
        last = node.value[-1]
        node = last[1] if isinstance(last, tuple) else last
    end = node.end_mark.index
    while end > node.start_mark.index and text[end - 1] in " \t\r\n":
        end -= 1
    return end


def _end_of_node(text: str, node: yaml.Node) -> int:
    """Just past the line on which `node` ends (a trailing comment on that line belongs to it)."""
    return _after_line(text, max(_content_end(text, node) - 1, node.start_mark.index))


def _checked(new: str, expected: Any, what: str) -> str:
    """Return `new` only when it parses to exactly `expected`."""
    try:
        got = yaml.safe_load(new)
    except yaml.YAMLError as err:
        raise EditError(f"cannot {what}: the edit would not be valid YAML ({err}); edit the file by hand") from None
    if got != expected:
        raise EditError(f"cannot {what} without changing other data; edit the file by hand")
    return new
