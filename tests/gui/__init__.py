"""Widget tests in a real napari viewer (run under xvfb-run; marked ``gui``)."""
