"""The engine: one application (a pass on every rank of a case) through every
check to its verdict (``application``), where it runs (``isolation``), the
matrix of applications (``matrix_runner``) and the reviewed baseline they are
compared with (``baseline``)."""
