"""The contract between stages: every record a stage writes and a later one reads.

    Status        one job's outcome (final) or state (pending, running)
    JobConfig     config.json: everything a job needs on the GPU node
    JobResult     result.json: what a job did, with its measurements
    Manifest      jobs/<sweep>/sweep.json: the plan and every run of the driver
    Candidate, Choice, Best
                  results/<sweep>/best.json: each group's pick and its evidence (its
                  Certification and ShapeBest records, like result.json's Sampled,
                  are in sweep.records.evidence)
    Confirmation  results/<sweep>/confirmation.json: the combined pick end to end

Every file carries a `schema` ("sweep-<kind>/<version>"). A reader refuses a file
of another schema in one line that names the file and the command that writes it
anew (`Stale`); a file of the right schema but the wrong shape is `Damaged`.
Records are frozen; `to_dict()` gives what is written and `from_dict()` reads it.
"""

from sweep.records.base import DONE, FAILED, FINAL, NOT_FAILED, Damaged, Stale, Status, now, read_json  # noqa: F401
from sweep.records.jobs import (CONFIG_SCHEMA, RENDER_AGAIN, RERUN, RESULT_SCHEMA, JobConfig,  # noqa: F401
                                JobResult, JobSettings, read_result, set_aside, write_result)
from sweep.records.manifest import MANIFEST, MANIFEST_SCHEMA, Manifest, Skip  # noqa: F401
from sweep.records.picks import (BEST_SCHEMA, CONFIRMATION_SCHEMA, OWN_SIZES, RECOLLECT, Best, Candidate,  # noqa: F401
                                 Choice, Confirmation, load_record, values_words)
