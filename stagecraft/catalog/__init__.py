"""``build.py catalog``: a static site of every tag of the matrix: what each image holds
(read from the image, not the matrix's intent), the hardware it runs on, which tag fits a
machine (answered by the project's own chooser, probes.rank), and what changed.

Modules, one job each: ``hardware`` (GPU generations, drivers, CPU levels as probe
results), ``answers`` (the chooser over every machine), ``versions`` (versions from the
installed packages against labels), ``view`` (a tag's page as data), ``diff`` (package
changes), ``read`` (facts from the engine and the state dir: the only I/O besides
``site.write``), ``site`` (Jinja2 templates -> files), ``make`` (all of it), ``cli``.
"""
