"""Three views as a catalog site has them: a page of products with their review figures
(an aggregate over a join, rendered by a template), one product's page with its reviews, and
the same product as JSON."""

from django.db.models import Avg, Count
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, render

from catalog.models import Product

PAGE_SIZE = 20


def index(request: HttpRequest) -> HttpResponse:
    """`/?page=N`: the Nth page of products, with each one's review count and mean stars."""
    raw = request.GET.get("page", "1")
    page = int(raw) if raw.isdigit() and int(raw) > 0 else 1
    start = (page - 1) * PAGE_SIZE
    products = Product.objects.annotate(
        reviews_count=Count("reviews"), stars=Avg("reviews__stars")
    ).order_by("id")[start : start + PAGE_SIZE]
    return render(request, "catalog/index.html", {"products": products, "page": page})


def product(request: HttpRequest, pk: int) -> HttpResponse:
    item = get_object_or_404(Product, pk=pk)
    reviews = item.reviews.order_by("-stars", "id")
    return render(request, "catalog/product.html", {"product": item, "reviews": reviews})


def product_json(request: HttpRequest, pk: int) -> JsonResponse:
    item = get_object_or_404(Product, pk=pk)
    figures = item.reviews.aggregate(count=Count("id"), stars=Avg("stars"))
    return JsonResponse(
        {
            "id": item.pk,
            "name": item.name,
            "price_cents": item.price_cents,
            "stock": item.stock,
            "reviews": figures["count"],
            "stars": round(figures["stars"] or 0, 2),
        }
    )
