"""jobs/<sweep>/sweep.json: the plan and every run of the driver (Manifest, Skip)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

from sweep.core import atomic
from sweep.core.errors import SweepError
from sweep.records.base import Damaged, build_record, check_schema, read_json
from sweep.core.paths import COMMAND

MANIFEST_SCHEMA = "sweep-manifest/1"
MANIFEST = "sweep.json"


@dataclass(frozen=True, slots=True)
class Skip:
    """A planned point that breaks a constraint: never rendered."""

    tag: str
    reason: str
    macros: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Manifest:
    sweep: str
    space: str                          # the space file the sweep was run with
    strategy: str
    backend: str
    executor: str
    grid_size: int
    grid_product: str
    commit: str
    source_digest: str
    created: str
    tags: tuple[str, ...] = ()
    skipped: tuple[Skip, ...] = ()
    note: str = ""
    runs: tuple[dict[str, Any], ...] = ()   # one entry per driver run (bench/sweep_overhead.py reads them)
    space_snapshot: str = ""            # the space file as run, inside the sweep folder
    schema: str = MANIFEST_SCHEMA

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["tags"], d["skipped"], d["runs"] = list(self.tags), [asdict(s) for s in self.skipped], list(self.runs)
        return d

    @classmethod
    def from_dict(cls, data: Any, path: Path | str = MANIFEST) -> "Manifest":
        rewrite = f"run the sweep again (`{COMMAND} run SPACE.yaml`) to rewrite it"
        d = check_schema(data, path, MANIFEST_SCHEMA, rewrite)
        try:
            skipped = tuple(Skip(**s) for s in d.get("skipped", ()))
        except TypeError as e:
            raise Damaged(f"{path}: a skipped entry is not valid ({e}); {rewrite}") from None
        return build_record(cls, d, path, rewrite, tags=tuple(d.get("tags", ())), skipped=skipped,
                      runs=tuple(d.get("runs", ())))

    def save(self, sweep_dir: Path) -> Path:
        path = Path(sweep_dir) / MANIFEST
        atomic.write_json(path, self.to_dict())
        return path

    @classmethod
    def load(cls, sweep_dir: Path) -> "Manifest":
        path = Path(sweep_dir) / MANIFEST
        try:
            return cls.from_dict(read_json(path), path)
        except OSError:
            raise SweepError(f"{sweep_dir} is not a sweep (no {MANIFEST}); run `{COMMAND} run SPACE.yaml` "
                             "first") from None

    def with_run(self, run: Mapping[str, Any]) -> "Manifest":
        return replace(self, runs=self.runs + (dict(run),))

    def with_run_ended(self, ended: Mapping[str, Any]) -> "Manifest":
        """The last run's record completed with what is known once its results are written."""
        return replace(self, runs=self.runs[:-1] + ({**self.runs[-1], **ended},))
