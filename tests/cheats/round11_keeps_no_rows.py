"""Cheat (written while closing round 11): round 4's skipper, with its commitments keeping no rows of nodes.

The openings open an output only where the plan that committed to it kept the output's chunk-level nodes
(runners/commitments.py ``CommitPlan.rows``, at the level ``node_level`` picks), and the digest covers those rows. This
candidate replaces ``node_level`` in its own process (the module is its to import), so that its plans keep none: its
digest covers its slots' hashes alone, it has nothing to open, and the skipped slots (stale outputs of the previous
pass, round 4's cheat below) are seen only where a slot is shown in full. The judge must hold the candidate's rows to
the baseline's: the same outputs have them at the same levels."""
import runners.commitments as _commitments

_commitments.node_level = lambda *args: None
