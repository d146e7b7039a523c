"""The Text tab: concept search by phrase or exemplar box on a slice, a stack or a range."""
