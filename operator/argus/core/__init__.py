"""The pure core of Argus: everything that decides, nothing that does I/O.

Flow: a manifest's ``spec`` is parsed (``spec``), its text fields checked (``policy.check_text``)
and its ``$HOME`` macros expanded (``expand``); an advanced command is parsed into a typed
program, checked and generated again (``command``: syntax -> resolve -> launchers -> hydra ->
checks -> emit) under the path policy (``policy``); a basic spec's template (``template``)
goes through the same command checks; a valid task becomes a ``SubmissionPlan`` (``plan``).
The operator's queue (``queue``) and status mapping (``phases``) live here too. An
import-linter contract keeps kopf, kubernetes and ray out.
"""
