"""The Clicks and boxes tab: click and box prompts on the current slice, previewed, committed."""
