"""The Automatic tab: every object on a slice, a stack or a range, without prompts."""
