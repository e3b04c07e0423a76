"""The eval suite: operator questions run against a model, graded on the record.

:mod:`~overt.evals.cases` reads a case file (the shipped ``cases.json`` or
another in the same format), :mod:`~overt.evals.seed` builds a fresh runtime
seeded with known data for each case, :mod:`~overt.evals.grade` grades an
answer (the right tool with the right arguments, every figure grounded, see
:mod:`~overt.evals.figures`; the answer's language, :mod:`~overt.evals.language`;
no invented name, :mod:`~overt.evals.names`), and :mod:`~overt.evals.runner` runs
a suite and reports it. ``cases.json`` is the tuning set; ``locked.json`` the
locked set, measured on and never tuned against.
"""
