"""``python -m memviewer``: the CLI, for processes memviewer starts itself.

Background processes run ``python -I -m memviewer ...``: isolated mode keeps the
current folder (and PYTHONPATH) off ``sys.path``, so a ``memviewer/`` folder in the
directory the user happens to be in is never imported in place of the installed package.
"""

from memviewer.cli import main

if __name__ == "__main__":
    main()
