"""Reading a space file into plain Python data, within fixed bounds.

A space file is input from anyone; whatever its bytes, reading it either
returns data or raises a SweepError, quickly and in little memory:

    MAX_BYTES       1 MiB per file, checked before reading
    encoding        UTF-8; any other byte is named with its offset
    characters      a control character YAML forbids is named with its line and column
    MAX_DEPTH       levels of nested mappings and lists
    MAX_NODES       values in the document with every alias expanded: an 820-byte
                    "billion laughs" expands to 10**9 and is refused at once
    MAX_CHARS       characters of text, aliases expanded
    MAX_NUMBER      characters of one number (YAML 1.1 base-60 numbers cost
                    quadratic time in their length)
    duplicate keys  refused with the key and both lines (PyYAML keeps the last one
                    silently; a duplicated macro would lose its first values)

The document is built from libyaml's event stream with an explicit stack, not by
PyYAML's composer, which recurses (in C under libyaml: deep nesting overflows the
stack) and expands nothing until it is done. Every bound is checked as events
arrive, so nothing large is ever built. Scalars resolve and construct as with
yaml.safe_load (YAML 1.1: ints, floats, bools, nulls, timestamps); merge keys
(<<) work; a tag on a mapping or list (!!set, !!omap, !custom) is refused.
"""

from __future__ import annotations

import re
import stat
from pathlib import Path
from typing import Any

import yaml
from yaml import events
from yaml.nodes import ScalarNode

from sweep.core.errors import SweepError

MAX_BYTES = 1 << 20
MAX_DEPTH = 32
MAX_NODES = 100_000
MAX_CHARS = 4 * MAX_BYTES
MAX_NUMBER = 64

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)   # libyaml when present: ~20x faster
_NOT_PRINTABLE = re.compile("[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_DECIMAL = re.compile(r"(?:0|[1-9][0-9]{0,17})\Z")
_TAG = "tag:yaml.org,2002:"
_NUMBER_TAGS = (_TAG + "int", _TAG + "float")
_OPEN = object()       # an anchor whose collection is still being read
_NO_KEY = object()


def read(path: Path) -> Any:
    """The YAML document in `path` as dicts, lists and scalars (None for an empty file)."""
    text = decode(read_bytes(path), path)
    return parse(text, path)


def read_bytes(path: Path) -> bytes:
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode):
            raise SweepError(f"cannot read space file {path}: not a regular file; give the path to a .yaml file "
                             "(see spaces/)")
        if st.st_size > MAX_BYTES:
            raise SweepError(too_big(path, st.st_size))
        with path.open("rb") as f:
            data = f.read(MAX_BYTES + 1)
    except OSError as e:
        raise SweepError(f"cannot read space file {path}: {e.strerror or e}; give the path to a .yaml file "
                         "(see spaces/)") from None
    if len(data) > MAX_BYTES:    # grew since stat
        raise SweepError(too_big(path, len(data)))
    return data


def too_big(path: Path, size: int) -> str:
    return (f"{path}: {size:,} bytes, over the {MAX_BYTES:,} (1 MiB) a space file may hold; a space declares "
            "parameters and rules, not data: write long value lists as {range: [lo, hi, step]} or {pow2: [lo, hi]}")


def decode(data: bytes, path: Path) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise SweepError(f"{path}: byte {e.start} (line {line}) is 0x{data[e.start]:02x}, which is not UTF-8; "
                         "save the file as UTF-8 (Latin-1 'é' is the byte 0xe9, UTF-8 writes it as 0xc3 0xa9)") from None
    bad = _NOT_PRINTABLE.search(text)
    if bad:
        i = bad.start()
        raise SweepError(f"{path}: line {text.count(chr(10), 0, i) + 1}, column {i - text.rfind(chr(10), 0, i)}: "
                         f"character U+{ord(text[i]):04X} is a control character, which YAML does not allow; "
                         "remove it (tabs and newlines are fine)")
    return text.removeprefix("\ufeff")


def parse(text: str, path: Path) -> Any:
    """`text` as data, every bound checked while it is read."""
    builder = _Builder(path)
    try:
        for event in yaml.parse(text, Loader=_LOADER):
            builder.feed(event)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        at = f" line {mark.line + 1}, column {mark.column + 1}:" if mark else ""
        problem = " ".join(str(e.problem or e.context or "").split())
        raise SweepError(f"{path}:{at} not valid YAML ({problem}); fix the syntax there") from None
    except yaml.YAMLError as e:
        raise SweepError(f"{path}: not valid YAML ({' '.join(str(e).split())}); fix the syntax there") from None
    return builder.result


class _Frame:
    """A mapping or list being read."""

    __slots__ = ("container", "anchor", "line", "weight", "chars", "key", "key_line", "lines", "merges")

    def __init__(self, container: dict | list, anchor: str | None, line: int):
        self.container, self.anchor, self.line = container, anchor, line
        self.weight, self.chars = 1, 0
        self.key: Any = _NO_KEY
        self.key_line = 0
        self.lines: dict[Any, int] = {}     # mapping: each key's line, for duplicates
        self.merges: list[dict] = []


class _Builder:
    def __init__(self, path: Path):
        self.path = path
        self.result: Any = None
        self.stack: list[_Frame] = []
        self.anchors: dict[str, Any] = {}          # name -> (value, weight, chars), or _OPEN
        self.nodes = self.chars = self.documents = 0
        self.resolver = yaml.resolver.Resolver()
        self.constructor = yaml.constructor.SafeConstructor()
        self.scalars: dict[tuple[str, str], Any] = {}

    def fail(self, line: int, what: str) -> SweepError:
        at = self.where()
        return SweepError(f"{self.path}: line {line}{', in ' + at if at else ''}: {what}")

    def where(self) -> str:
        """Where in the document reading is, e.g. parameters.A.values[3]."""
        parts = []
        for f in self.stack:
            if isinstance(f.container, list):
                parts.append(f"[{len(f.container)}]")
            elif f.key is not _NO_KEY:
                k = f.key if isinstance(f.key, str) and f.key.isprintable() and len(f.key) <= 40 else repr(f.key)[:40]
                parts.append(("." if parts else "") + k)
        out = "".join(parts)
        return out if len(out) <= 80 else "..." + out[-77:]

    def feed(self, event: events.Event) -> None:
        line = event.start_mark.line + 1 if event.start_mark else 0
        kind = type(event)
        if kind is events.ScalarEvent:
            self.add(self.scalar(event, line), 1, len(event.value), line, event.anchor)
        elif kind is events.MappingStartEvent or kind is events.SequenceStartEvent:
            self.open(event, line)
        elif kind is events.MappingEndEvent or kind is events.SequenceEndEvent:
            self.close()
        elif kind is events.AliasEvent:
            self.alias(event.anchor, line)
        elif kind is events.DocumentStartEvent:
            self.documents += 1
            if self.documents > 1:
                raise self.fail(line, "a second YAML document ('---'); a space file is one document: remove it")

    def count(self, nodes: int, chars: int, line: int) -> None:
        self.nodes += nodes
        self.chars += chars
        if self.nodes > MAX_NODES:
            raise self.fail(line, f"the file holds over {MAX_NODES:,} values (aliases expanded), the most a space "
                                  "file may; write long value lists as {range: ...} or {pow2: ...}, and do not "
                                  "nest aliases")
        if self.chars > MAX_CHARS:
            raise self.fail(line, f"the file holds over {MAX_CHARS:,} characters of text (aliases expanded), the most "
                                  "a space file may; do not repeat long text through aliases")

    def scalar(self, event: events.ScalarEvent, line: int) -> Any:
        value = event.value
        if event.tag is None:           # fast paths for most values, giving what the YAML 1.1 resolver gives
            if not event.implicit[0] or (value and value[0] not in self.resolver.yaml_implicit_resolvers):
                return value            # quoted, or no implicit type starts with this character: a string
            if _DECIMAL.match(value):
                return int(value)
        tag = event.tag
        if tag is None or tag == "!":
            tag = self.resolver.resolve(ScalarNode, event.value, event.implicit)
        if tag == _TAG + "merge":
            return _Merge
        key = (tag, event.value)
        if key not in self.scalars:
            if tag in _NUMBER_TAGS and len(event.value) > MAX_NUMBER:
                raise self.fail(line, f"a number of {len(event.value):,} characters ({event.value[:20]}...); "
                                      f"numbers here have at most {MAX_NUMBER}: write a launch size in digits")
            node = ScalarNode(tag, event.value, event.start_mark, event.end_mark, event.style)
            try:
                self.scalars[key] = self.constructor.construct_object(node)
            except (ValueError, OverflowError, TypeError) as e:
                raise self.fail(line, f"cannot read {event.value[:40]!r} as {tag.removeprefix(_TAG)} ({e}); "
                                      "quote it to make it a string, or fix the value") from None
            self.constructor.constructed_objects.clear()
        return self.scalars[key]

    def open(self, event: events.CollectionStartEvent, line: int) -> None:
        mapping = isinstance(event, events.MappingStartEvent)
        if event.tag not in (None, "!", _TAG + ("map" if mapping else "seq")):
            raise self.fail(line, f"the tag {event.tag} is not allowed; a space file holds plain mappings, lists "
                                  "and values: remove the tag")
        if len(self.stack) >= MAX_DEPTH:
            raise self.fail(line, f"mappings and lists nest more than {MAX_DEPTH} levels deep, the most a space "
                                  "file may; a space file is a few levels deep (parameters.NAME.values)")
        self.count(1, 0, line)
        if event.anchor is not None:
            self.anchor(event.anchor, line)
            self.anchors[event.anchor] = _OPEN
        self.stack.append(_Frame({} if mapping else [], event.anchor, line))

    def close(self) -> None:
        f = self.stack.pop()
        value = f.container
        if isinstance(value, dict) and f.merges:
            merged: dict = {}
            for m in reversed(f.merges):       # earlier merged mappings win, the mapping's own keys over all
                merged.update(m)
            merged.update(value)
            value = merged
        if f.anchor is not None:
            self.anchors[f.anchor] = (value, f.weight, f.chars)
        self.place(value, f.weight, f.chars, f.line)

    def alias(self, name: str, line: int) -> None:
        target = self.anchors.get(name)
        if target is None:
            raise self.fail(line, f"the alias *{name} names no anchor (&{name}) defined before it; define it first")
        if target is _OPEN:
            raise self.fail(line, f"the alias *{name} refers to the mapping or list that contains it; a space file "
                                  "cannot refer to itself")
        value, weight, chars = target
        self.count(weight, chars, line)
        self.place(value, weight, chars, line)

    def anchor(self, name: str, line: int) -> None:
        if name in self.anchors:
            raise self.fail(line, f"the anchor &{name} is defined twice; give each anchor its own name")

    def add(self, value: Any, weight: int, chars: int, line: int, anchor: str | None) -> None:
        self.count(weight, chars, line)
        if anchor is not None:
            self.anchor(anchor, line)
            self.anchors[anchor] = (value, weight, chars)
        self.place(value, weight, chars, line)

    def place(self, value: Any, weight: int, chars: int, line: int) -> None:
        """Puts a finished value into the collection being read (or makes it the document)."""
        if not self.stack:
            self.result = value
            return
        f = self.stack[-1]
        f.weight += weight
        f.chars += chars
        if isinstance(f.container, list):
            f.container.append(value)
        elif f.key is _NO_KEY:
            if isinstance(value, (dict, list)):
                raise self.fail(line, "a mapping key must be a plain value, not a mapping or a list")
            if value is not _Merge and value in f.lines:
                raise self.fail(line, f"the key {value!r} appears twice in one mapping (first at line "
                                      f"{f.lines[value]}); keys are unique: remove or rename one")
            if value is not _Merge:
                f.lines[value] = line
            f.key, f.key_line = value, line
        else:
            if f.key is _Merge:
                f.merges.extend(self.merge_sources(value, line))
            else:
                f.container[f.key] = value
            f.key = _NO_KEY

    def merge_sources(self, value: Any, line: int) -> list[dict]:
        sources = value if isinstance(value, list) else [value]
        if not sources or not all(isinstance(s, dict) for s in sources):
            raise self.fail(line, "'<<' merges a mapping or a list of mappings (e.g. <<: *defaults)")
        return sources


class _Merge:
    """The merge key '<<'."""
