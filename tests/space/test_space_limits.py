"""Bounded input: any space file up to 1 MiB loads or is refused with one SweepError line,
within 1 s and 200 MB, whatever its bytes."""

from __future__ import annotations

import os
import re
import time
import tracemalloc
from pathlib import Path

import pytest
import yaml

from sweep.space import target
from sweep.core.errors import SweepError
from sweep.space import MAX_VALUES, Space, check, make_config, reader

ROOT = Path(__file__).resolve().parents[2]
REAL = sorted((ROOT / "spaces").glob("*.yaml")) + sorted((ROOT / "tests" / "data").glob("*.yaml"))
SECONDS = 1.0
MARGIN = 0.25            # a shared, loaded CI machine
MEGABYTES = 200

BOMB = "\n".join([
    'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
    *(f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]" for p, c in zip("abcdefgh", "bcdefghi")),
]) + "\n"


def load_bytes(tmp_path: Path, data: bytes, name: str = "space.yaml") -> Space:
    path = tmp_path / name
    path.write_bytes(data)
    return target.load(path)


def refused(tmp_path: Path, data: bytes | str) -> str:
    """The one-line message a file is refused with, checked to come within the time and memory bounds."""
    data = data.encode() if isinstance(data, str) else data
    started = time.monotonic()                    # timed without tracing, which slows Python several-fold
    with pytest.raises(SweepError) as e:
        load_bytes(tmp_path, data)
    elapsed = time.monotonic() - started
    tracemalloc.start()
    try:
        with pytest.raises(SweepError):
            load_bytes(tmp_path, data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert elapsed < SECONDS + MARGIN, f"{elapsed:.2f} s"
    assert peak < MEGABYTES << 20, f"{peak >> 20} MB"
    message = str(e.value)
    assert message.startswith(str(tmp_path / "space.yaml")) and "\n" not in message
    return message


# ---------------------------------------------------------------------------
# The cases that used to explode
# ---------------------------------------------------------------------------


def test_yaml_alias_bomb_is_refused_before_it_expands(tmp_path):
    assert len(BOMB) < 1024                      # expands to 9**9 strings
    msg = refused(tmp_path, BOMB)
    assert "over 100,000 values (aliases expanded)" in msg and "line 6, in f[0]" in msg


def test_alias_bomb_inside_a_value_list_is_refused_too(tmp_path):
    msg = refused(tmp_path, BOMB + "parameters:\n  A: {values: *i}\n")
    assert "aliases expanded" in msg


def test_range_to_int32_max_is_sized_before_it_is_expanded(tmp_path):
    msg = refused(tmp_path, "parameters:\n  A: {values: {range: [0, 2147483647]}}\n")
    assert "parameters.A.values: range [0, 2147483647, 1] holds 2,147,483,648 values" in msg
    assert f"over the {MAX_VALUES} a parameter may have" in msg and "narrow the bounds or widen the step" in msg


def test_latin1_byte_is_named_with_its_offset(tmp_path):
    data = "name: caf\xe9\nparameters:\n  A: {values: [1]}\n".encode("latin-1")
    msg = refused(tmp_path, data)
    assert f"byte {data.index(0xe9)} (line 1) is 0xe9, which is not UTF-8" in msg and "save the file as UTF-8" in msg


@pytest.mark.parametrize("expr,fragment", [
    ("not " * 200 + "A", "nests more than the 50 levels a constraint may"),
    ("-" * 900 + "A > 0", "nests more than the 50 levels"),
    ("(" * 5000 + "A" + ")" * 5000, "10,001 characters, over the 1000 a constraint may have"),
    ("(" * 300 + "A" + ")" * 300 + " > 0", "is not an expression (too many nested parentheses)"),
    ("A" + " + A" * 200, "nests more than the 50 levels"),
], ids=["not", "minus", "long", "parentheses", "sum"])
def test_deeply_nested_constraint_is_refused_with_its_text(tmp_path, expr, fragment):
    msg = refused(tmp_path, f"parameters:\n  A: {{values: [1]}}\nconstraints: ['{expr}']\n")
    assert "constraints[0]: " + repr(expr[:100]) in msg and fragment in msg


@pytest.mark.parametrize("text", ["[" * 500_000, "- " * 500_000, "a: " * 300_000, "{a: " * 200_000],
                         ids=["flow_list", "block_list", "block_map", "flow_map"])
def test_deeply_nested_yaml_is_refused_at_the_depth_limit(tmp_path, text):
    msg = refused(tmp_path, text)
    assert "nest more than 32 levels deep" in msg or "not valid YAML" in msg


def test_hundred_thousand_value_list_is_refused_fast_naming_where(tmp_path):
    msg = refused(tmp_path, "parameters:\n  A: {values: [" + ", ".join(map(str, range(1, 100_001))) + "]}\n")
    assert "line 2, in parameters.A.values[" in msg and "over 100,000 values" in msg


def test_value_list_over_the_cap_names_the_parameter_and_its_size(tmp_path):
    msg = refused(tmp_path, "parameters:\n  A: {values: [" + ", ".join(map(str, range(1, 5001))) + "]}\n")
    assert f"parameters.A.values: 5,000 values, over the {MAX_VALUES} a parameter may have" in msg


def test_duplicate_value_in_a_long_list_is_named_in_linear_time(tmp_path):
    values = list(range(1, MAX_VALUES)) + [77]
    msg = refused(tmp_path, f"parameters:\n  A: {{values: {values}}}\n")
    assert "parameters.A.values: value(s) [77] appear more than once" in msg


def test_longest_allowed_value_list_loads(tmp_path):
    s = load_bytes(tmp_path, f"parameters:\n  A: {{values: {list(range(1, MAX_VALUES + 1))}}}\n".encode())
    assert len(s.parameter("A").values) == MAX_VALUES


@pytest.mark.parametrize("text,fragment", [
    ("parameters:\n  A: {values: [0, 32]}\n", "parameters.A.values: 0 is not a launch size"),
    ("parameters:\n  A: {values: 0}\n", "parameters.A.values: 0 is not a launch size"),
    ("parameters:\n  A: {values: {range: [0, 64, 32]}}\n", "parameters.A.values: 0 is not a launch size"),
    ("parameters:\n  A: {values: [32], default: 0}\n", "parameters.A.default: 0 is not a launch size"),
    ("parameters:\n  A: {values: [32, -1]}\n", "parameters.A.values: -1 is not an integer from 0 to 2147483647"),
    ("parameters:\n  A: {values: [32]}\nstrategy: tuples\ntuples: {rows: [[0]]}\n", "tuples.rows[0]: 0 is not a launch size"),
], ids=["list", "single", "range", "default", "negative", "tuples_row"])
def test_zero_and_negative_launch_sizes_are_refused(tmp_path, text, fragment):
    msg = refused(tmp_path, text)
    assert fragment in msg
    if "0 is not" in fragment:
        assert "declare min: 0 on the parameter" in msg


def test_zero_is_a_value_where_the_parameter_declares_min_and_min_decides(tmp_path):
    s = load_bytes(tmp_path, b"parameters:\n  A: {values: [0, 32], min: 0}\n  B: {values: [0, 32], min: 16}\n")
    assert s.parameter("A").values == (0, 32)
    assert check(s, make_config(s, {"A": 0, "B": 32})) is None
    assert check(s, make_config(s, {"A": 0, "B": 0})) == "B >= 16 is false (" + str(tmp_path / "space.yaml") + \
        ": parameters.B.min)"


@pytest.mark.parametrize("text,fragment", [
    ("parameters:\n  A: {values: [1]}\n  A: {values: [2]}\n",
     "line 3, in parameters: the key 'A' appears twice in one mapping (first at line 2)"),
    ("parameters:\n  A: {values: [1], values: [2]}\n",
     "line 2, in parameters.A: the key 'values' appears twice in one mapping (first at line 2)"),
    ("constraints: []\nparameters:\n  A: {values: [1]}\nconstraints: ['A > 0']\n",
     "line 4: the key 'constraints' appears twice in one mapping (first at line 1)"),
], ids=["macro", "parameter_key", "top_level"])
def test_duplicate_keys_are_refused_with_the_key_and_both_lines(tmp_path, text, fragment):
    msg = refused(tmp_path, text)
    assert fragment in msg and "remove or rename one" in msg


def test_file_over_one_mebibyte_is_refused_by_its_size(tmp_path):
    data = b"parameters:\n  A: {values: [1]}\n" + b"#" * (1 << 20)
    msg = refused(tmp_path, data)
    assert f"{len(data):,} bytes, over the 1,048,576 (1 MiB) a space file may hold" in msg


def test_file_of_exactly_one_mebibyte_still_loads(tmp_path):
    head = b"parameters:\n  A: {values: [1]}\n# "
    data = head + b"x" * ((1 << 20) - len(head) - 1) + b"\n"
    assert len(data) == 1 << 20
    started = time.monotonic()
    assert load_bytes(tmp_path, data).parameter("A").values == (1,)
    assert time.monotonic() - started < SECONDS + MARGIN


# ---------------------------------------------------------------------------
# The rest of what the reader bounds
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("data,fragment", [
    (b"parameters:\n  A: {values: [1]}\x07\n", "line 2, column 19: character U+0007 is a control character"),
    (b"parameters:\n  A: {values: [1]}\n---\nname: x\n", "line 3: a second YAML document ('---')"),
    (b"parameters: &p {A: {values: [1]}, B: *p}\n", "the alias *p refers to the mapping or list that contains it"),
    (b"parameters:\n  A: {values: *nope}\n", "the alias *nope names no anchor (&nope) defined before it"),
    (b"parameters:\n  A: {values: &x [1], doc: &x d}\n", "the anchor &x is defined twice"),
    (b"parameters: !!python/object/apply:os.system ['true']\n", "tag:yaml.org,2002:python/object/apply:os.system is not allowed"),
    (b"parameters:\n  A: {values: [!!python/name:os.system ]}\n", "not valid YAML (could not determine a constructor"),
    (b"parameters: !!set {A}\n", "the tag tag:yaml.org,2002:set is not allowed"),
    (b"parameters:\n  A: {values: [1" + b":30" * 100 + b"]}\n", "a number of 301 characters"),
    (b"parameters:\n  A: {values: [2001-02-30]}\n", "cannot read '2001-02-30' as timestamp"),
    (b"parameters:\n  ? [A]\n  : {values: [1]}\n", "a mapping key must be a plain value"),
    (b"x: &s " + b"y" * 400_000 + b"\nrun: {args: [" + b"*s, " * 12 + b"*s]}\n", "over 4,194,304 characters of text"),
    (b"parameters:\n  A: {<<: 3, values: [1]}\n", "'<<' merges a mapping or a list of mappings"),
    (b"parameters:\n  A: {values: [1]\n", "line 3, column 1: not valid YAML"),
], ids=["control_char", "two_documents", "recursive_alias", "undefined_alias", "anchor_twice", "python_tag",
        "python_scalar_tag", "set_tag", "base60_number", "bad_timestamp", "complex_key", "text_expansion", "bad_merge",
        "syntax"])
def test_reader_refuses_with_line_and_cause(tmp_path, data, fragment):
    assert fragment in refused(tmp_path, data)


def test_merge_keys_and_anchors_work_as_in_safe_load(tmp_path):
    s = load_bytes(tmp_path, b"parameters:\n  A: &a {tag: T, values: [1, 2], kernels: [k]}\n"
                             b"  B: {<<: *a, tag: U, values: [3]}\n")
    assert s.parameter("B").kernels == ("k",) and s.parameter("B").values == (3,) and s.parameter("B").tag == "U"


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_reader_reads_the_shipped_spaces_exactly_as_safe_load(path):
    assert reader.read(path) == yaml.safe_load(path.read_text())


def test_python_tags_never_run(tmp_path):
    marker = tmp_path / "pwned"
    for text in (f"parameters: !!python/object/apply:os.system ['touch {marker}']\n",
                 f"name: !!python/object/new:os.system ['touch {marker}']\nparameters:\n  A: {{values: [1]}}\n"):
        refused(tmp_path, text)
    assert not marker.exists()


# ---------------------------------------------------------------------------
# Property: whatever the bytes, a Space or one SweepError line, within 1 s
# ---------------------------------------------------------------------------

hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies

TEXTS = [p.read_bytes() for p in REAL]
NASTY = [
    b"0", b"-1", b"2147483648", b"1" + b"0" * 80, b"1.5", b"'8'", b"~", b"true", b"[]", b"{}", b"*x", b"&x [1, 2]",
    b"{range: [0, 2147483647]}", b"{range: [1, 10, 0]}", b"{pow2: [0, 4294967296]}", b"[" * 64, b"!!binary aGk=",
    b"!!python/object:os.system", b"\xe9", b"\x00", b"\t", b"<<: *x", b"? [a]", b"---", b"'", b'"\\x00"',
    b"A ** A ** A ** 99", b"A << 10 ** 9", b"\xef\xbb\xbf", b"2001-12-14", b"0x1f", b"1:30", b"\xff\xfe",
]
SNIPPETS = [
    BOMB.encode(),
    b"x: &x {a: 1}\n",
    b"parameters:\n  A: {values: [1]}\n  A: {values: [2]}\n",
    b"constraints: ['" + b"not " * 200 + b"A']\n",
    b"parameters:\n  Z: {values: [" + b", ".join(b"%d" % i for i in range(1, 30_001)) + b"]}\n",
    b"strategy: {name: random, samples: 3, seed: 1}\n",
    b"strategy: tuples\ntuples: {columns: [A], rows: [[1], [2, 3]]}\n",
    b"target: {name: t, dir: \"\\0\", profile: [x]}\n",
    b"target: {name: t, dir: '" + b"d/" * 3000 + b"', profile: [x]}\n",
    b"model: {preset: [1], seed: x}\n",
]
KEYS = ["name", "description", "target", "model", "strategy", "tuples", "samples", "seed", "parameters",
        "constraints", "build", "run", "profile", "slurm", "values", "tag", "kernels", "default", "equals", "min",
        "max", "multiple_of", "power_of_two", "expr", "why", "range", "pow2", "columns", "rows", "A", "B", "C_D"]


@st.composite
def mutated_spaces(draw) -> bytes:
    """A real space file with a few byte, line, value or snippet mutations."""
    data = bytearray(draw(st.sampled_from(TEXTS)))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["byte", "insert", "delete", "line", "value", "snippet"]))
        at = draw(st.integers(0, max(0, len(data) - 1)))
        if kind == "byte" and data:
            data[at] = draw(st.integers(0, 255))
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8) | st.sampled_from(NASTY))
        elif kind == "delete":
            del data[at:at + draw(st.integers(1, 40))]
        elif kind == "line":
            lines = bytes(data).split(b"\n")
            i, j = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
            op = draw(st.sampled_from(["dup", "drop", "swap"]))
            if op == "dup":
                lines.insert(j, lines[i])
            elif op == "drop":
                del lines[i]
            else:
                lines[i], lines[j] = lines[j], lines[i]
            data = bytearray(b"\n".join(lines))
        elif kind == "value":
            numbers = list(re.finditer(rb"\b\d+\b", bytes(data)))
            if numbers:
                m = draw(st.sampled_from(numbers))
                data[m.start():m.end()] = draw(st.sampled_from(NASTY))
        else:
            snippet = draw(st.sampled_from(SNIPPETS))
            data = bytearray(bytes(data) + b"\n" + snippet if draw(st.booleans()) else snippet + b"\n" + bytes(data))
    return bytes(data)


yaml_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**40, 2**40) | st.floats() | st.text(max_size=20)
    | st.sampled_from(KEYS),
    lambda children: st.lists(children, max_size=6) | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=8),
                                                                      children, max_size=6),
    max_leaves=40)


@st.composite
def random_yaml(draw) -> bytes:
    """Random YAML: anything, or space-shaped mappings with random parts."""
    if draw(st.booleans()):
        doc = draw(yaml_values)
    else:
        valid = {"A": {"values": [1, 2], "tag": "T"}, "B": {"values": {"pow2": [1, 8]}, "default": 2}}
        params = draw(st.just(valid) | st.dictionaries(st.sampled_from(["A", "B", "C_D", "a"]), yaml_values, max_size=3))
        doc = {"parameters": params, **draw(st.dictionaries(st.sampled_from(KEYS), yaml_values, max_size=4))}
        if draw(st.booleans()):
            doc["constraints"] = draw(st.lists(st.text(alphabet="AB()+-*/%<>=!&|~ notandor0123456789", max_size=40),
                                               max_size=3))
    return yaml.safe_dump(doc, allow_unicode=draw(st.booleans())).encode()


@pytest.fixture(scope="module")
def fuzz_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


@hypothesis.settings(max_examples=int(os.environ.get("SPACE_FUZZ_EXAMPLES", 200)), deadline=None, database=None,
                     suppress_health_check=list(hypothesis.HealthCheck))
@hypothesis.given(data=mutated_spaces() | random_yaml())
def test_any_space_file_loads_or_is_refused_in_one_line_within_a_second(fuzz_dir, data):
    path = fuzz_dir / "fuzz.yaml"
    path.write_bytes(data)
    started = time.monotonic()
    try:
        assert isinstance(target.load(path), Space)
    except SweepError as e:
        message = str(e)
        assert message and "\n" not in message, message
    elapsed = time.monotonic() - started
    assert elapsed < SECONDS + MARGIN, f"{elapsed:.2f} s for {len(data):,} bytes"
