"""What the forkserver of a local CPU sweep imports before it forks any run (launchers.LocalLauncher),
and nothing else imports: torch, Lightning and every task, once for all the runs (about 8 s on 2 cores,
longer than many of a sweep's runs train), and the git commit of that code. The runs forked from the
forkserver start where these imports end and record this commit (records.provenance caches it).
"""

from lit_attention.sweep.launchers import die_with_parent

die_with_parent()  # the forkserver ends with the sweep, and with it the runs it forked

import lit_attention.training.cli  # noqa: E402, F401  (the slow imports)
from lit_attention.training.records import provenance  # noqa: E402

provenance()
