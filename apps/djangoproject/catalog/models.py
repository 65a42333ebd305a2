"""A product catalog: products and their reviews."""

from django.db import models


class Product(models.Model):
    name = models.CharField(max_length=100)
    price_cents = models.PositiveIntegerField()
    stock = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return self.name


class Review(models.Model):
    product = models.ForeignKey(Product, related_name="reviews", on_delete=models.CASCADE)
    stars = models.PositiveSmallIntegerField()
    text = models.TextField()

    def __str__(self) -> str:
        return f"{self.stars} stars for {self.product_id}"
