"""The notebook workbench: widgets over the stages of a compiled program."""
