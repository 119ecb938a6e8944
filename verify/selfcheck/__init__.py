"""The suite checking itself: mutants of passes and programs it must catch
(``mutate``, ``mutation_catalog``, ``program_mutants``) and the audit of the
pass sources' op vocabulary (``vocabulary``)."""
