"""The pure core of Argus: everything that decides, nothing that does I/O.

Flow: a manifest's ``spec`` is parsed (``spec``), its paths expanded (``expand``), its
command read as shell (``shell``) and checked (``policy``), and a valid task becomes a
``SubmissionPlan`` (``plan``). The operator's queue (``queue``) and status mapping
(``phases``) live here too. An import-linter contract keeps kopf, kubernetes and ray out.
"""
