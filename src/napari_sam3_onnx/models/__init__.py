"""Model bundles: registry, download and verification, sessions, and one adapter per layout."""
