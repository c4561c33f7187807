"""Question sets and their scores, shared by `rag eval` (rag.eval.run), its reports
(rag.eval.report) and the fitting and report scripts; nothing in the pipeline imports it.

`sets`: load and validate a YAML set (kinds, fit/held-out splits, paper references);
`metrics`: score one answer and aggregate per split.
"""
