"""The model section of the dock: bundle, device, cache budget and the embedding store."""
