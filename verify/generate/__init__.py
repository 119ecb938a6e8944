"""Generated plans (``python -m verify generate``): seeded model specs
(``models``), planned by Paddle's planner and judged by the planner family
(``run``), shrunk when they fail (``shrink``), with the planner-coverage
report of the planning processes' traces (``coverage``).  A tool: the top
layer; nothing below imports it."""
