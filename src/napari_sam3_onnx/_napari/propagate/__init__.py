"""The Propagate tab: objects carried from the current slice through z (or t)."""
