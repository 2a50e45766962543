"""YAML files with line numbers, so every problem can point at its line."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

FieldPath = tuple[str | int, ...]
INT_TAG = "tag:yaml.org,2002:int"
#: Integers YAML 1.1 (PyYAML's) reads in a base few writers mean: a leading 0 is octal, colons base 60.
YAML11_SURPRISE = re.compile(r"[-+]?0[0-7_]+|[-+]?[1-9][0-9_]*(:[0-5]?[0-9])+")
# libyaml's parser when PyYAML has it: the same documents and marks, several times faster.
SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass
class YamlFile:
    """A parsed YAML document plus the line of every mapping key and list item."""

    path: Path
    display: str
    data: Any
    lines: dict[FieldPath, int] = field(default_factory=dict)
    # What YAML would read otherwise than it looks, as (path, message), for the file's problems:
    #: keys given twice in one mapping (the last one kept silently, a second `DATABASE_URL:` replacing the first);
    repeated: list[tuple[FieldPath, str]] = field(default_factory=list)
    #: numbers YAML 1.1 reads as octal or base 60 (`0755` as 493, `1:30` as 90).
    misread: list[tuple[FieldPath, str]] = field(default_factory=list)

    def line(self, path: FieldPath) -> int | None:
        """The line of `path`, or of its nearest ancestor that has one."""
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return self.lines.get((), 1)


def load_yaml(path: Path, display: str) -> YamlFile:
    """Parse `path`; yaml.YAMLError propagates with its own mark for the caller to report."""
    loader = SafeLoader(path.read_text(encoding="utf-8"))
    file = YamlFile(path=path, display=display, data=None)
    try:
        node = loader.get_single_node()  # one parse gives both the data and its marks
        if node is not None:
            # Indexed first: constructing merges `<<: *anchor` keys into the node itself, after
            # which a key the mapping overrides would look given twice.
            _index(node, (), file)
        file.data = loader.construct_document(node) if node is not None else None
    finally:
        loader.dispose()
    return file


SPECIAL_FILE = "not a regular file (a FIFO, socket or device)"


def not_a_regular_file(path: Path) -> bool:
    """Something other than a file is there: a FIFO's or a device's read would wait for ever."""
    return path.exists() and not path.is_file() and not path.is_dir()


def refuse_special_file(path: Path) -> None:
    """OSError, as an unreadable file gives, before a read of `path` that would wait for ever."""
    if not_a_regular_file(path):
        raise OSError(SPECIAL_FILE)


def unreadable_reason(err: Exception) -> str:
    """Why a file could not be read, on one line (a YAML error's own text spans several)."""
    mark = getattr(err, "problem_mark", None)
    if isinstance(err, yaml.YAMLError) and mark is not None:
        return f"not valid YAML at line {mark.line + 1}: {getattr(err, 'problem', None) or 'unparsable'}"
    return str(err).splitlines()[0] if str(err) else type(err).__name__


def load_yaml_if_usable(path: Path, display: str) -> YamlFile | None:
    """`path` parsed for its line numbers, or None when it is missing, not UTF-8 or not valid YAML."""
    try:
        return load_yaml(path, display) if path.is_file() else None
    except (UnicodeDecodeError, yaml.YAMLError):
        return None


def stack_config_file(root: Path, stack: str) -> str:
    """The stack's config file relative to the program in `root`, as messages name it: under
    Pulumi.yaml's `stackConfigDir` (`stacks/` here), beside Pulumi.yaml in a program without one."""
    settings = load_yaml_if_usable(root / "Pulumi.yaml", "Pulumi.yaml")
    folder = settings.data.get("stackConfigDir") if settings and isinstance(settings.data, dict) else None
    return f"{str(folder).rstrip('/')}/Pulumi.{stack}.yaml" if folder else f"Pulumi.{stack}.yaml"


def encryption_salt(root: Path, stack: str) -> str | None:
    """The stack's `encryptionsalt` (the passphrase secrets provider's) from its config file, if any."""
    display = stack_config_file(root, stack)
    config = load_yaml_if_usable(root / display, display)
    salt = config.data.get("encryptionsalt") if config and isinstance(config.data, dict) else None
    return salt if isinstance(salt, str) else None


def _index(node: yaml.Node, path: FieldPath, file: YamlFile, within: tuple[yaml.Node, ...] = (),
           seen: set[int] | None = None) -> None:
    if any(node is outer for outer in within):
        # `a: &x [*x]`: a value that contains itself, which nothing here can read to the end.
        raise yaml.constructor.ConstructorError(
            None, None, f"{format_path(path) or 'the document'} refers to a node that contains it (an alias "
            "inside its own anchor); write the value out", node.start_mark)
    file.lines.setdefault(path, node.start_mark.line + 1)
    seen = set() if seen is None else seen
    if id(node) in seen:
        # An alias of a node indexed already: its lines are known, and walking it once per use would take
        # exponential time over aliases of aliases (a few hundred bytes can ask for billions of nodes).
        return
    seen.add(id(node))
    within += (node,)
    if isinstance(node, yaml.MappingNode):
        first: dict[str, int] = {}
        for key_node, value_node in node.value:
            key, line = str(key_node.value), key_node.start_mark.line + 1
            child = path + (key,)
            if key in first and key != "<<":  # merge keys may repeat: YAML merges each
                file.repeated.append((child, f"{key!r} is given twice in one mapping (first on line {first[key]}; "
                                             "keep one: YAML would keep the last one silently)"))
            first[key] = line
            file.lines[child] = line
            _index(value_node, child, file, within, seen)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _index(item, path + (index,), file, within, seen)
    elif node.tag == INT_TAG and YAML11_SURPRISE.fullmatch(node.value):
        base, number = 60 if ":" in node.value else 8, yaml.safe_load(node.value)
        file.misread.append((path, f"YAML reads {node.value} as the number {number} (base {base}): quote it "
                                    f"('{node.value}') for text, or write {number}"))


def format_path(path: FieldPath) -> str:
    """`('resources', 0, 'kind')` → `resources[0].kind`."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text
