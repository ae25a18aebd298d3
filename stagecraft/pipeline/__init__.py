"""The pipeline: each command's run, out of the command line (issue 21).

``context`` makes the run context once from the parsed options (matrix, images, engine,
state directory); ``planning`` turns chosen images into platforms and a plan;
``buildrun`` builds, ``testrun`` tests, ``pushrun`` gates and pushes, ``signrun`` signs
and verifies; ``views`` shows the matrix, its plan and this host (list, render, plan, probe,
catalog); ``exports`` writes the plan for other builders (matrix, bake);
``upkeep`` holds the commands that look after an engine or the lock (prune, freeze,
lock, doctor); ``output`` is how all of them print.
``commands`` names the run of each command for ``stagecraft.cli``.
"""
