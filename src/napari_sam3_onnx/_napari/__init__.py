"""The napari front end: the only package that imports napari, Qt and magicgui."""
