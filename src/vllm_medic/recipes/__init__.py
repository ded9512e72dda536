"""Recipes are data: shipped YAML (kimi-k3, generic), a user's YAML, or an official vllm-project/recipes file."""

from vllm_medic.recipes.loader import RecipeInfo, list_recipes, load_recipe
from vllm_medic.recipes.model import Recipe

__all__ = ["Recipe", "RecipeInfo", "list_recipes", "load_recipe"]
