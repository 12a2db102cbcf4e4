"""How a model should be launched on a machine: the memory formulas, the planner, the machine's
facts, measured memory lines and speeds."""
