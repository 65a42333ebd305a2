"""`python manage.py seed`: the rows a measurement reads (after `python manage.py migrate`).

Idempotent: an already seeded database is left as it is.
"""

from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction

from catalog.models import Product, Review


class Command(BaseCommand):
    help = "Create sample products and reviews (once)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--products", type=int, default=1000)
        parser.add_argument("--reviews", type=int, default=5, help="reviews per product")

    def handle(self, *args: Any, products: int, reviews: int, **options: Any) -> None:
        if not Product.objects.exists():
            with transaction.atomic():
                made = Product.objects.bulk_create(
                    Product(name=f"Product {n}", price_cents=100 + n * 37 % 9900, stock=n % 50)
                    for n in range(1, products + 1)
                )
                Review.objects.bulk_create(
                    Review(product=item, stars=1 + (item.pk + k) % 5, text=f"Review {k}")
                    for item in made
                    for k in range(reviews)
                )
        self.stdout.write(f"{Product.objects.count()} products, {Review.objects.count()} reviews")
