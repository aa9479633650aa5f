# Load the grader plugin from this folder (an installed plugin would need no line here).
pytest_plugins = ["snake_case_grader"]
