import pytest

pytest.register_assert_rewrite("tests.providers.localstack.helpers")
