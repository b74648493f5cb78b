"""Capacity planning: sweeps of plans (sweep), the best plan for a budget (choice)."""

# What `perfmodel plan --objective` optimises; here, apart from choice.py, so that the CLI names
# them without importing the planner (a prediction starts faster).
OBJECTIVES = ("throughput", "cost", "time")
