"""Root conftest of the pytest-goldeval repository.

It holds nothing on purpose: `pytest --golden=generation-v1` at the project root must behave
exactly as it would in a user's project. Overrides of `golden_provider`, `golden_retriever`
or `golden_graders` would go here (see docs/adding-a-provider.md).
"""
