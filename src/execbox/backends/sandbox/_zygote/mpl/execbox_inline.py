"""The matplotlib backend of the sandbox's stateful session
(``MPLBACKEND=module://execbox_inline``; runs INSIDE the jail, imported by
matplotlib only when a block uses pyplot).

Figures are drawn with Agg; ``show()`` (called by a block, and by the
session at the end of each block) renders every open figure to PNG bytes
in ``shown`` and closes it, as the Jupyter inline backend does. The session
sends ``shown`` to the host as displays.
"""

import io

from matplotlib._pylab_helpers import Gcf
from matplotlib.backends.backend_agg import FigureCanvasAgg

FigureCanvas = FigureCanvasAgg
shown = []  # type: list[bytes]


def show(*args, **kwargs):
    from matplotlib import pyplot  # here: pyplot imports this module

    for manager in Gcf.get_all_fig_managers():
        buffer = io.BytesIO()
        manager.canvas.figure.savefig(buffer, format="png", bbox_inches="tight")
        shown.append(buffer.getvalue())
    pyplot.close("all")
