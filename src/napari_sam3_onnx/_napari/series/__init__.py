"""The dock's series mode: a folder (or multi-image file) annotated image by image."""
