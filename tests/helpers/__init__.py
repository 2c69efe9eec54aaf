"""What the test modules share: models, op cases, random graphs, a fused program, LLIRs without the e-graph, a
small DOM over headless Chromium, and the JupyterLab server and notebooks of the browser tests. Test modules
import from here, never from each other (``tests/test_layers.py`` checks); shared fixtures live in conftest.py."""
