from django.urls import path

from techempower import views

urlpatterns = [
    path("json", views.json_serialization),
    path("db", views.single_query),
    path("queries", views.multiple_queries),
    path("fortunes", views.fortunes),
    path("updates", views.updates),
    path("plaintext", views.plaintext),
]
