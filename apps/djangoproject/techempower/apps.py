from django.apps import AppConfig


class TechempowerConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "techempower"
