from django.urls import path

from catalog import views

urlpatterns = [
    path("", views.index, name="index"),
    path("products/<int:pk>/", views.product, name="product"),
    path("api/products/<int:pk>/", views.product_json, name="product-json"),
]
