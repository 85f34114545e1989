
urlpatterns: list = []
