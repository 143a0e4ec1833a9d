"""A program's build files, read, never run: the Makefile (and the makefiles it includes) or the
CMakeLists.txt, for what `config-sweep init` needs of them: which build system and program, and the
folders besides the program's own where the build finds headers (sweep.space.init)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

CMAKE_EXECUTABLE = re.compile(r"add_executable\s*\(\s*([A-Za-z0-9_.+-]+)")
MAKE_ALL = re.compile(r"^all\s*:(?P<deps>[^\n]*)$", re.M)
MAKE_ASSIGN = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)[ \t]*(?::=|\?=|=)[ \t]*(?P<value>[^\n#]*)", re.M)
MAKE_INCLUDE = re.compile(r"^-?include[ \t]+(?P<files>[^\n#]+)", re.M)
MAKE_VARIABLE = re.compile(r"\$[({](?P<name>[A-Za-z_][A-Za-z0-9_]*)[)}]")
INCLUDE_FLAG = re.compile(r"(?:^|\s)-I[ \t]*(?P<dir>[^\s$()]+)")
CMAKE_INCLUDE_DIRS = re.compile(r"\b(?:target_)?include_directories\s*\((?P<args>[^)]*)\)", re.I)
CMAKE_SOURCE_DIR = re.compile(r"\$\{(?:CMAKE_CURRENT_SOURCE_DIR|CMAKE_SOURCE_DIR|PROJECT_SOURCE_DIR)\}")
CMAKE_KEYWORDS = {"PRIVATE", "PUBLIC", "INTERFACE", "BEFORE", "AFTER", "SYSTEM"}


def build_system(program_dir: Path, makefiles: Makefiles | None = None) -> tuple[str, str]:
    """("make" | "cmake", the program's guessed name): a Makefile that takes CONF_DIR is the
    target contract; else a CMakeLists.txt; else a Makefile anyway (the comments say what it must take)."""
    mk_text = (makefiles or read_makefiles(program_dir)).text
    cm = program_dir / "CMakeLists.txt"
    if cm.is_file() and "CONF_DIR" not in mk_text:
        names = CMAKE_EXECUTABLE.findall(cm.read_text(errors="replace"))
        return "cmake", names[0] if names else program_dir.name
    variables: dict[str, str] = {}
    for a in MAKE_ASSIGN.finditer(mk_text):          # the first assignment wins: the Makefile's own
        variables.setdefault(a.group("name"), a.group("value").strip())
    m = MAKE_ALL.search(mk_text)
    words = [expanded(w, variables).rsplit("/", 1)[-1] for w in (m.group("deps").split() if m else [])]
    return "make", next((w for w in words if re.fullmatch(r"[A-Za-z0-9_.+-]+", w)), program_dir.name)


@dataclass(frozen=True, slots=True)
class Makefiles:
    """A folder's Makefile and the makefiles it includes whose paths resolve from the folder, each
    read once (never run): an example's Makefile names its PROGRAM and includes the rules
    (examples/common/program.mk)."""

    own: str = ""                       # the Makefile's text ("": the folder has none)
    included: tuple[Path, ...] = ()     # the makefiles it includes (included_makefiles)
    text: str = ""                      # the Makefile's text, then each included one's


def read_makefiles(program_dir: Path) -> Makefiles:
    mk = program_dir / "Makefile"
    if not mk.is_file():
        return Makefiles()
    own = mk.read_text(errors="replace")
    included = tuple(included_makefiles(program_dir, own))
    return Makefiles(own, included, "\n".join([own] + [p.read_text(errors="replace") for p in included]))


def included_makefiles(program_dir: Path, text: str) -> list[Path]:
    """The makefiles the folder's Makefile (its `text`) includes whose paths resolve from the folder (a
    leading variable that names the Makefile's own folder, one set from MAKEFILE_LIST or CURDIR, read
    as that folder)."""
    here = {a.group("name") for a in MAKE_ASSIGN.finditer(text)
            if "MAKEFILE_LIST" in a.group("value") or "CURDIR" in a.group("value")} | {"CURDIR"}
    out = []
    for inc in MAKE_INCLUDE.finditer(text):
        for word in inc.group("files").split():
            lead = MAKE_VARIABLE.match(word)
            path = program_dir / word[lead.end():].lstrip("/") if lead and lead.group("name") in here else \
                program_dir / word
            if "$" not in str(path) and path.is_file():
                out.append(path)
    return out


def header_dirs(program_dir: Path, makefiles: Makefiles | None = None) -> list[Path]:
    """Folders besides the program's own where its build finds headers, as far as the text says:
    the folders of the makefiles its Makefile includes (a shared makefile sits beside the shared
    headers it puts on the include path: examples/common), literal `-I` folders of the makefiles,
    and the folders a CMakeLists.txt's include_directories() or target_include_directories() name
    (${CMAKE_CURRENT_SOURCE_DIR} and the like read as the program's folder). makefiles: the folder's,
    read here when None."""
    mk = makefiles or read_makefiles(program_dir)
    dirs = [p.parent for p in mk.included]
    dirs += [program_dir / m.group("dir") for m in INCLUDE_FLAG.finditer(mk.text)]
    dirs += include_variable_dirs(program_dir, mk)
    cm = program_dir / "CMakeLists.txt"
    if cm.is_file():
        for call in CMAKE_INCLUDE_DIRS.finditer(cm.read_text(errors="replace")):
            for word in call.group("args").replace('"', " ").split():
                word = CMAKE_SOURCE_DIR.sub(".", word)
                if "$" not in word and "<" not in word and word not in CMAKE_KEYWORDS:
                    dirs.append(program_dir / word)
    return list(dict.fromkeys(d.resolve() for d in dirs if d.is_dir()))


def include_variable_dirs(program_dir: Path, makefiles: Makefiles) -> list[Path]:
    """The folders a variable of the folder's own Makefile lists where a line of its makefiles puts
    that variable on the include path (`$(foreach d,$(SOURCE_DIRS),-I$(d))`): a program that
    includes another folder's kernels (examples/gemm_stencil). The Makefile's own-folder variable is
    read as the folder; a word still holding a variable is left out."""
    assigned = {a.group("name"): a.group("value") for a in MAKE_ASSIGN.finditer(makefiles.own)}
    here = {n: str(program_dir) for n, v in assigned.items() if "MAKEFILE_LIST" in v or "CURDIR" in v}
    on_path = {v.group("name") for line in makefiles.text.splitlines() if "-I" in line for v in MAKE_VARIABLE.finditer(line)}
    words = [expanded(w, {**assigned, **here}) for n in on_path & set(assigned) if n not in here
             for w in assigned[n].split()]
    return [Path(w) if Path(w).is_absolute() else program_dir / w for w in words if "$" not in w]


def expanded(word: str, variables: dict[str, str], depth: int = 4) -> str:
    """`word` with each $(NAME) or ${NAME} of a simple assignment replaced by its value (nested ones
    too, a few levels deep); the others stay as they are."""
    for _ in range(depth):
        new = MAKE_VARIABLE.sub(lambda v: variables.get(v.group("name"), v.group(0)), word)
        if new == word:
            break
        word = new
    return word
