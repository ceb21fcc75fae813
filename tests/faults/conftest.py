"""The world fixture of the data tests: a fresh world per test, checked for leaks at the end."""

from tests.data.conftest import world as world
